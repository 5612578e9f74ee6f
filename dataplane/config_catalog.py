"""Every setting Rafka knows, described as Kafka describes its own (DescribeConfigs), and where a
broker setting's value comes from.

Broker settings are `BrokerConfig`'s fields under their Kafka names: their documentation and
default come from the fields, their Kafka type from the Python type except where Kafka's differs
(LONG, SHORT, LIST, PASSWORD: `_BROKER_TYPES`). Topic settings are the topic configs
meta/topic_config.py validates (the meta service checks them at CreateTopics too); each names the
broker settings that give its default (Kafka's ServerTopicConfigSynonyms).

A broker setting's value is, highest first (Kafka's DynamicBrokerConfig): the dynamic config of
this broker, the cluster-wide dynamic default, the static setting (properties file, environment,
command line), the default. Only the settings Kafka treats as dynamic *and* Rafka applies live
can be set dynamically (`ConfigKey.dynamic`); the others are read-only, as Kafka reports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cache, cached_property
from typing import Any

from pydantic import SecretStr, TypeAdapter, ValidationError

from common.settings import kafka_name
from dataplane.config import BrokerConfig
from dataplane.config_docs import TOPIC_DOCS
from meta.topic_config import TOPIC_CONFIGS as TOPIC_CHECKS
from meta.topic_config import invalid, number_problem

CLUSTER_DEFAULT = -1  # the broker id under which the cluster-wide dynamic configs are kept
LONG_MAX = 2**63 - 1


class ConfigType(IntEnum):
    """DescribeConfigs' config_type (Kafka's ConfigDef.Type)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"


def type_problem(kind: ConfigType, value: str) -> str | None:
    """Why `value` is not a value of Kafka type `kind` (Kafka's ConfigDef.parseType message), or
    None."""
    if kind in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE):
        return number_problem(kind.name, value)
    if kind is ConfigType.BOOLEAN and value.strip().lower() not in ("true", "false"):
        return "Expected value to be either true or false"
    return None


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One setting as DescribeConfigs describes it."""

    name: str
    type: ConfigType
    doc: str
    default: str | None  # Kafka's text form; None: no default
    dynamic: str = ""  # PER_BROKER, CLUSTER_WIDE, or "": not changeable at runtime
    synonyms: tuple[str, ...] = ()  # topic configs: the broker settings of its default
    field: str = ""  # broker settings: the BrokerConfig field

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def read_only(self) -> bool:
        return not self.dynamic

    def problem(self, value: str) -> str | None:
        """Kafka's message when `value` is not valid for this setting (its type, then the
        range of the topic config it is the default of), or None."""
        if problem := type_problem(self.type, value):
            return invalid(self.name, value, problem)
        topic_check = TOPIC_CHECKS.get(self.name) or TOPIC_CHECKS.get(_TOPIC_OF.get(self.name, ""))
        return topic_check(self.name, value) if topic_check is not None else None


def value_text(value: Any) -> str | None:
    """A setting's value as Kafka writes it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


# -- broker settings -------------------------------------------------------------------------

# Kafka's type where the Python type does not tell it (int is INT, str STRING, bool BOOLEAN,
# float DOUBLE, SecretStr PASSWORD).
_BROKER_TYPES: dict[str, ConfigType] = {
    **dict.fromkeys(
        (
            "log.roll.ms",
            "log.flush.interval.messages",
            "log.flush.interval.ms",
            "log.retention.ms",
            "log.retention.bytes",
            "log.retention.check.interval.ms",
            "log.cleaner.backoff.ms",
            "log.cleaner.min.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            "log.cleaner.delete.retention.ms",
            "offsets.retention.check.interval.ms",
            "replica.lag.time.max.ms",
            "connections.max.reauth.ms",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            "delegation.token.max.lifetime.ms",
            "delegation.token.expiry.time.ms",
            "leader.replication.throttled.rate",
            "follower.replication.throttled.rate",
            "connections.max.idle.ms",
            "log.message.timestamp.before.max.ms",
            "log.message.timestamp.after.max.ms",
            "log.segment.delete.delay.ms",
            "log.roll.jitter.ms",
        ),
        ConfigType.LONG,
    ),
    **dict.fromkeys(
        (
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr",
        ),
        ConfigType.SHORT,
    ),
    **dict.fromkeys(
        (
            "listeners",
            "advertised.listeners",
            "log.dirs",
            "log.cleanup.policy",
            "ssl.enabled.protocols",
            "ssl.cipher.suites",
            "sasl.enabled.mechanisms",
            "sasl.oauthbearer.expected.audience",
            "group.consumer.assignors",
        ),
        ConfigType.LIST,
    ),
    **dict.fromkeys(
        (
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
            "ssl.key.password",
            "ssl.truststore.certificates",
            "sasl.jaas.config",
            "delegation.token.secret.key",
            "internal.ssl.keystore.certificate.chain",
            "internal.ssl.truststore.certificates",
        ),
        ConfigType.PASSWORD,
    ),
}

# Settings Kafka has no default for: their field's default is what Rafka does when they are
# not set (log.retention.ms: from log.retention.hours; "": none), which Kafka reports as null.
_NO_DEFAULT = frozenset(
    (
        "log.retention.ms",
        "log.roll.ms",
        "log.flush.interval.ms",
        "advertised.listeners",
        "replica.selector.class",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.jwks.endpoint.url",
        "ssl.keystore.location",
        "ssl.truststore.location",
        "internal.ssl.keystore.location",
        "internal.ssl.truststore.location",
    )
)

# Settings Kafka's KafkaConfig does not define (quota rates are dynamic-only, the ACL settings
# the authorizer's own): Kafka's DescribeConfigs lists them only once set.
_LISTED_WHEN_SET = frozenset(
    (
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "super.users",
        "allow.everyone.if.no.acl.found",
    )
)

# Broker settings that apply live when changed dynamically, beyond the broker defaults of topic
# configs (`_TOPIC_TABLE`'s first synonyms, Kafka's DynamicLogConfig): Kafka's LogCleaner and
# replication quota settings that Rafka reads at runtime, and SocketServer's connection limits.
# Kafka's other dynamic settings Rafka has take a restart here (READ_AT_START): read-only.
READ_AT_START = frozenset(
    (
        "listeners",
        "listener.security.protocol.map",
        "producer.id.expiration.ms",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        *(
            f"ssl.{name}"
            for name in (
                "cipher.suites",
                "client.auth",
                "enabled.protocols",
                "key.password",
                "keystore.certificate.chain",
                "keystore.key",
                "keystore.location",
                "keystore.type",
                "truststore.certificates",
                "truststore.location",
                "truststore.type",
            )
        ),
    )
)
"""Kafka's dynamic broker settings that Rafka reads at start only (listener.name.* overrides
of them too): AlterConfigs refuses them, saying to restart."""

_MORE_DYNAMIC = (
    "log.cleaner.backoff.ms",
    *(f"{s}.replication.throttled.rate" for s in ("leader", "follower")),
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
)

# Synonyms that express one setting in other units (Kafka's brokerConfigSynonyms), the first
# winning; the effective value of the first is computed from whichever is set.
_UNIT_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "log.roll.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
}
_SYNONYM_GROUP = {
    name: tuple(n for n, _ in group) for group in _UNIT_SYNONYMS.values() for name, _ in group
}


def _python_type(annotation: Any) -> ConfigType:
    if annotation is bool:
        return ConfigType.BOOLEAN
    if annotation is float:
        return ConfigType.DOUBLE
    if annotation is SecretStr:
        return ConfigType.PASSWORD
    if annotation in (int, int | None):
        return ConfigType.INT
    return ConfigType.STRING


def _doc(name: str, description: str | None) -> str:
    """The field's description without the "name: " it starts with."""
    text = (description or "").strip()
    for prefix in (f"{name}: ", f"{name} "):
        if text.startswith(prefix):
            return text[len(prefix) :].strip()
    return "" if text.rstrip(".") == name else text


# -- topic settings --------------------------------------------------------------------------

# topic config -> (Kafka type, Kafka's default when no broker setting gives one, the broker
# settings giving its default, first wins: Kafka's ServerTopicConfigSynonyms). Documentation:
# Kafka's own (config_docs).
_TOPIC_TABLE: dict[str, tuple[ConfigType, str | None, tuple[str, ...]]] = {
    "cleanup.policy": (ConfigType.LIST, "delete", ("log.cleanup.policy",)),
    "compression.type": (ConfigType.STRING, "producer", ("compression.type",)),
    "delete.retention.ms": (ConfigType.LONG, "86400000", ("log.cleaner.delete.retention.ms",)),
    "file.delete.delay.ms": (ConfigType.LONG, "60000", ("log.segment.delete.delay.ms",)),
    "flush.messages": (ConfigType.LONG, str(LONG_MAX), ("log.flush.interval.messages",)),
    "flush.ms": (ConfigType.LONG, str(LONG_MAX), ("log.flush.interval.ms",)),
    "follower.replication.throttled.replicas": (ConfigType.LIST, "", ()),
    "index.interval.bytes": (ConfigType.INT, "4096", ("log.index.interval.bytes",)),
    "leader.replication.throttled.replicas": (ConfigType.LIST, "", ()),
    "max.compaction.lag.ms": (
        ConfigType.LONG,
        str(LONG_MAX),
        ("log.cleaner.max.compaction.lag.ms",),
    ),
    "max.message.bytes": (ConfigType.INT, "1048588", ("message.max.bytes",)),
    "message.timestamp.after.max.ms": (
        ConfigType.LONG,
        "3600000",
        ("log.message.timestamp.after.max.ms",),
    ),
    "message.timestamp.before.max.ms": (
        ConfigType.LONG,
        str(LONG_MAX),
        ("log.message.timestamp.before.max.ms",),
    ),
    "message.timestamp.type": (ConfigType.STRING, "CreateTime", ("log.message.timestamp.type",)),
    "min.cleanable.dirty.ratio": (ConfigType.DOUBLE, "0.5", ("log.cleaner.min.cleanable.ratio",)),
    "min.compaction.lag.ms": (ConfigType.LONG, "0", ("log.cleaner.min.compaction.lag.ms",)),
    "min.insync.replicas": (ConfigType.INT, "1", ("min.insync.replicas",)),
    "preallocate": (ConfigType.BOOLEAN, "false", ("log.preallocate",)),
    "retention.bytes": (ConfigType.LONG, "-1", ("log.retention.bytes",)),
    "retention.ms": (ConfigType.LONG, "604800000", _SYNONYM_GROUP["log.retention.ms"]),
    "segment.bytes": (ConfigType.INT, "1073741824", ("log.segment.bytes",)),
    "segment.index.bytes": (ConfigType.INT, str(10 << 20), ("log.index.size.max.bytes",)),
    "segment.jitter.ms": (ConfigType.LONG, "0", _SYNONYM_GROUP["log.roll.jitter.ms"]),
    "segment.ms": (ConfigType.LONG, "604800000", _SYNONYM_GROUP["log.roll.ms"]),
    "unclean.leader.election.enable": (
        ConfigType.BOOLEAN,
        "false",
        ("unclean.leader.election.enable",),
    ),
}


def _build_broker_keys() -> dict[str, ConfigKey]:
    dynamic = {s[0] for _, _, s in _TOPIC_TABLE.values() if s} | set(_MORE_DYNAMIC)
    keys = {}
    for fname, info in BrokerConfig.model_fields.items():
        if fname == "prefixed":
            continue
        name = kafka_name(fname)
        default = info.default
        keys[name] = ConfigKey(
            name=name,
            type=_BROKER_TYPES.get(name, _python_type(info.annotation)),
            doc=_doc(name, info.description),
            default=None
            if isinstance(default, SecretStr) or name in _NO_DEFAULT
            else value_text(default),
            dynamic=CLUSTER_WIDE if name in dynamic else "",
            field=fname,
        )
    return keys


BROKER_KEYS: dict[str, ConfigKey] = _build_broker_keys()

TOPIC_KEYS: dict[str, ConfigKey] = {
    name: ConfigKey(
        name=name,
        type=_TOPIC_TABLE[name][0],
        doc=TOPIC_DOCS[name],
        default=_TOPIC_TABLE[name][1],
        dynamic=CLUSTER_WIDE,
        synonyms=tuple(s for s in _TOPIC_TABLE[name][2] if s in BROKER_KEYS),
    )
    for name in sorted(TOPIC_CHECKS)
}

# broker setting -> the topic config it is the default of (its value checks are the topic's)
_TOPIC_OF: dict[str, str] = {s: name for name, key in TOPIC_KEYS.items() for s in key.synonyms[:1]}

# The values Kafka's DEFAULT_CONFIG synonyms show: every broker setting with a default that
# Kafka's KafkaConfig defines (not the replication throttles and the authorizer's settings).
_DEFAULTS: dict[str, str] = {
    n: k.default
    for n, k in BROKER_KEYS.items()
    if k.default is not None and n not in _LISTED_WHEN_SET
}


def broker_key(name: str) -> ConfigKey | None:
    """The setting `name` names: a broker setting, or a listener's override of one
    (listener.name.<listener>.[<mechanism>.]<setting>, typed as the setting it overrides)."""
    key = BROKER_KEYS.get(name)
    if key is not None or not name.startswith("listener.name."):
        return key
    base = _listener_base(name)
    found = BROKER_KEYS.get(base)
    if found is None:
        return None
    return ConfigKey(name, found.type, found.doc, None)


def _listener_base(name: str) -> str:
    """listener.name.<listener>.<setting> -> <setting>; the mechanism part of a SASL setting
    (listener.name.<l>.<mechanism>.sasl.jaas.config) is dropped too."""
    rest = name.split(".", 3)[3] if name.count(".") >= 3 else ""
    for base in BROKER_KEYS:
        if rest == base or rest.endswith("." + base):
            return base
    return rest


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the names one broker setting goes by,
    highest first."""
    if name in _SYNONYM_GROUP:
        return _SYNONYM_GROUP[name]
    if name.startswith("listener.name."):
        return (name, _listener_base(name))
    return (name,)


# -- values and where they come from ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One setting of a described resource."""

    key: ConfigKey
    value: str | None  # None for sensitive settings
    source: ConfigSource
    synonyms: tuple[Synonym, ...]


@cache
def _adapter(fname: str) -> TypeAdapter[Any]:
    annotation: Any = BrokerConfig.model_fields[fname].annotation
    return TypeAdapter(annotation)


@dataclass(frozen=True)
class ConfigLayers:
    """A broker's settings: its static `BrokerConfig` under its dynamic configs (its own, then
    the cluster-wide default), as the metadata cache has them."""

    static: BrokerConfig
    per_broker: Mapping[str, str] = field(default_factory=dict)
    cluster: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, static: BrokerConfig, dynamic: Mapping[int, Mapping[str, str]]) -> ConfigLayers:
        """The layers of broker `static.node_id` given every broker's dynamic configs."""
        return cls(
            static, dict(dynamic.get(static.node_id, {})), dict(dynamic.get(CLUSTER_DEFAULT, {}))
        )

    @cached_property
    def static_values(self) -> dict[str, str]:
        """The settings the broker was started with explicitly (not defaults), Kafka-named."""
        values = {
            kafka_name(f): value_text(getattr(self.static, f))
            for f in self.static.model_fields_set
            if f in BrokerConfig.model_fields and f != "prefixed"
        }
        return {k: v for k, v in values.items() if v is not None} | dict(self.static.prefixed)

    def _layers(self) -> tuple[tuple[Mapping[str, str], ConfigSource], ...]:
        return (
            (self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static_values, ConfigSource.STATIC_BROKER_CONFIG),
            (_DEFAULTS, ConfigSource.DEFAULT_CONFIG),
        )

    def synonyms(self, name: str, sensitive: bool) -> list[Synonym]:
        """Kafka's ConfigHelper.configSynonyms: every layer's value of each name `name` goes by
        (broker_synonyms), highest layer first, from the first of `name` itself on (a value
        of a name that wins over it, e.g. log.retention.ms over log.retention.hours, is not
        its synonym)."""
        names = broker_synonyms(name)
        found = [
            Synonym(n, None if sensitive else values[n], source)
            for values, source in self._layers()
            for n in names
            if n in values
        ]
        while found and found[0].name != name:
            found.pop(0)
        return found

    @cached_property
    def applied(self) -> dict[str, str]:
        """The dynamic configs that apply: Rafka's dynamic settings whose stored value is
        valid (the broker's own over the cluster default)."""
        out: dict[str, str] = {}
        for values in (self.cluster, self.per_broker):
            for name, value in values.items():
                key = BROKER_KEYS.get(name)
                if key is not None and key.dynamic and key.problem(value) is None:
                    out[name] = value
        return out

    @cached_property
    def ignored(self) -> list[tuple[str, str]]:
        """Stored dynamic configs that do not apply here (unknown, read-only, or invalid)."""
        return [
            (name, value)
            for values in (self.cluster, self.per_broker)
            for name, value in values.items()
            if self.applied.get(name) != value
        ]

    @cached_property
    def effective(self) -> BrokerConfig:
        """The settings in force: the static ones with the dynamic ones that apply, and the
        settings other units express (log.retention.hours, ...) resolved into the first."""
        update: dict[str, Any] = {}
        for name, value in self.applied.items():
            fname = BROKER_KEYS[name].field
            try:
                update[fname] = _adapter(fname).validate_python(value.strip())
            except ValidationError:
                continue
        merged = self.static_values | self.applied
        for first, group in _UNIT_SYNONYMS.items():
            given = next(((n, f) for n, f in group if merged.get(n) is not None), None)
            name, factor = given or group[-1]
            text = merged.get(name, _DEFAULTS.get(name))
            if text is not None:
                update[BROKER_KEYS[first].field] = int(text) * factor
        return self.static.model_copy(update=update)

    # -- DescribeConfigs ----------------------------------------------------------------------

    def broker_entries(self, cluster_default: bool) -> list[ConfigEntry]:
        """Kafka's createBrokerConfigEntry over every setting (this broker: `cluster_default`
        False) or over the cluster-wide dynamic configs only (True)."""
        if cluster_default:
            names = sorted(self.cluster)
        else:
            given = {*self.static_values, *self.per_broker, *self.cluster}
            names = sorted({*(n for n in BROKER_KEYS if n not in _LISTED_WHEN_SET), *given})
        out = []
        for name in names:
            key = broker_key(name) or ConfigKey(name, ConfigType.UNKNOWN, "", None)
            found = self.synonyms(name, key.sensitive)
            if cluster_default:
                found = [s for s in found if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = None if key.sensitive else self._value(name, cluster_default)
            source = found[0].source if found else ConfigSource.DEFAULT_CONFIG
            out.append(ConfigEntry(key, value, source, tuple(found)))
        return out

    def _value(self, name: str, cluster_default: bool) -> str | None:
        if cluster_default:
            return self.cluster.get(name)
        for values in (self.per_broker, self.cluster, self.static_values):
            if name in values:
                return values[name]
        key = BROKER_KEYS.get(name)
        return key.default if key is not None else None

    def topic_entries(self, overrides: Mapping[str, str]) -> list[ConfigEntry]:
        """Kafka's createTopicConfigEntry over every topic config: the topic's own value, else
        the broker setting that gives its default, else Kafka's default."""
        effective = self.effective
        out = []
        for name, key in TOPIC_KEYS.items():
            found = self.synonyms(key.synonyms[0], key.sensitive) if key.synonyms else []
            if name in overrides:
                value: str | None = overrides[name]
                found.insert(0, Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            elif key.synonyms:
                value = value_text(getattr(effective, BROKER_KEYS[key.synonyms[0]].field))
            else:
                value = key.default
            source = found[0].source if found else ConfigSource.DEFAULT_CONFIG
            out.append(ConfigEntry(key, value, source, tuple(found)))
        return out
