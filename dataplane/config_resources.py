"""Config resources that are no topic and no broker, one catalog per Kafka ConfigResource type:
GROUP (32) here, CLIENT_METRICS (16) added by the telemetry code. Their configs are stored by the
meta service (meta/resource_configs.py) and read from `MetadataCache.resource_configs`.

A catalog gives what DescribeConfigs and Incremental/AlterConfigs need: the config keys (name,
type, doc), the value each takes when the resource does not set it, which ACL resource guards
it, and Kafka's validation of a resource's whole config set (INVALID_CONFIG messages).

GROUP configs are Kafka's GroupConfig minus the assignment intervals: a group's own session
timeout, heartbeat interval, share settings and streams settings, validated against the
broker's `group.consumer.*` / `group.share.*` / `group.streams.*` min/max bounds as Kafka's
GroupConfig.validate does, and defaulting to the broker's settings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dataplane.config import BrokerConfig
from dataplane.config_catalog import ConfigKey, ConfigType, type_problem
from dataplane.protocol.errors import ErrorCode
from dataplane.telemetry import catalog as client_metrics
from meta.acl import CLUSTER_NAME, ResourceType
from meta.resource_configs import GROUP

__all__ = [
    "CATALOGS",
    "GROUP",
    "ISOLATION_LEVELS",
    "ResourceCatalog",
    "auto_offset_reset_problem",
    "group_configs_problem",
]

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


@dataclass(frozen=True)
class ResourceCatalog:
    """What a config resource type has: its keys, their values when unset (from the broker's
    settings), the ACL resource type guarding it and the problem of a resource's config set."""

    resource_type: int
    label: str  # "group", for messages
    keys: Mapping[str, ConfigKey]
    defaults: Callable[[BrokerConfig], Mapping[str, str]]
    problem: Callable[[Mapping[str, str], BrokerConfig], str | None]
    # DESCRIBE_CONFIGS / ALTER_CONFIGS are checked on this ACL resource (`acl_name` None: the
    # config resource's own name), refused with `denied` (Kafka's error for that type)
    acl_resource: ResourceType
    acl_name: str | None
    denied: ErrorCode
    # Synonyms after the resource's own value, as Kafka's ConfigHelper gives them: for each
    # config of a GROUP, the broker setting its default comes from (GroupConfig.brokerSynonym;
    # one not listed: its own default, as DEFAULT_CONFIG); None (CLIENT_METRICS): none.
    broker_synonyms: Mapping[str, str] | None = None


# -- GROUP -------------------------------------------------------------------------------------

_ISO_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def by_duration_ms(value: str) -> int | None:
    """The milliseconds of a `by_duration:<ISO-8601 duration>` (java.time.Duration.parse's
    PnDTnHnMn.nS), None when it does not parse or is negative."""
    match = _ISO_DURATION.fullmatch(value.strip())
    if match is None or value.strip().upper() in ("P", "PT") or value.strip().upper().endswith("T"):
        return None
    days, hours, minutes = (int(match[g] or 0) for g in ("d", "h", "m"))
    seconds = float(match["s"] or 0)
    return round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def auto_offset_reset_problem(value: str) -> str | None:
    """Kafka's ShareGroupAutoOffsetResetStrategy.Validator, with its text."""
    text = value.strip().lower()
    if text in ("earliest", "latest"):
        return None
    if text.startswith("by_duration:") and (
        by_duration_ms(value.strip()[len("by_duration:") :]) is not None
    ):
        return None
    return (
        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
        "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )


def _key(name: str, kind: ConfigType, doc: str) -> ConfigKey:
    return ConfigKey(name, kind, doc, None, dynamic="group")


_GROUP_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _key(
            "consumer.session.timeout.ms",
            ConfigType.INT,
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        _key(
            "consumer.heartbeat.interval.ms",
            ConfigType.INT,
            "The heartbeat interval given to the members of a consumer group.",
        ),
        _key(
            "streams.session.timeout.ms",
            ConfigType.INT,
            "The timeout to detect client failures when using the streams group protocol.",
        ),
        _key(
            "streams.heartbeat.interval.ms",
            ConfigType.INT,
            "The heartbeat interval given to the members.",
        ),
        _key(
            "streams.num.standby.replicas",
            ConfigType.INT,
            "The number of standby replicas for each task.",
        ),
        _key(
            "streams.initial.rebalance.delay.ms",
            ConfigType.INT,
            "The amount of time the group coordinator will wait for more streams clients to join "
            "a new group before performing the first rebalance. A longer delay means potentially "
            "fewer rebalances.",
        ),
        _key(
            "share.session.timeout.ms",
            ConfigType.INT,
            "The timeout to detect client failures when using the share group protocol.",
        ),
        _key(
            "share.heartbeat.interval.ms",
            ConfigType.INT,
            "The heartbeat interval given to the members of a share group.",
        ),
        _key(
            "share.record.lock.duration.ms",
            ConfigType.INT,
            "The record acquisition lock duration in milliseconds for share groups.",
        ),
        _key(
            "share.delivery.count.limit",
            ConfigType.INT,
            "The maximum number of delivery attempts for a record delivered to a share group.",
        ),
        _key(
            "share.partition.max.record.locks",
            ConfigType.INT,
            "Share-group record lock limit per share-partition.",
        ),
        _key(
            "share.auto.offset.reset",
            ConfigType.STRING,
            "The strategy to initialize the share-partition start offset: earliest, latest, "
            "or by_duration:<ISO-8601 duration> (from the current timestamp).",
        ),
        _key(
            "share.isolation.level",
            ConfigType.STRING,
            "Controls how to read records written transactionally: read_committed delivers "
            "only committed transactional records, read_uncommitted all of them.",
        ),
    )
}

# group config -> (broker setting giving its default, its lowest and highest allowed value;
# the broker settings named as Kafka's messages name them; None: no such setting)
_GROUP_BOUNDS: dict[str, tuple[str, str | None, str | None]] = {
    "streams.session.timeout.ms": (
        "group.streams.session.timeout.ms",
        "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms",
    ),
    "streams.heartbeat.interval.ms": (
        "group.streams.heartbeat.interval.ms",
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    "streams.num.standby.replicas": (
        "group.streams.num.standby.replicas",
        None,
        "group.streams.max.standby.replicas",
    ),
    "streams.initial.rebalance.delay.ms": ("group.streams.initial.rebalance.delay.ms", None, None),
    "consumer.session.timeout.ms": (
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    "consumer.heartbeat.interval.ms": (
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    "share.session.timeout.ms": (
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    "share.heartbeat.interval.ms": (
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    "share.record.lock.duration.ms": (
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    "share.delivery.count.limit": (
        "group.share.delivery.count.limit",
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
    "share.partition.max.record.locks": (
        "group.share.partition.max.record.locks",
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
}
# Kafka's ConfigDef lower bounds (atLeast) of the group configs
_AT_LEAST = {
    "share.record.lock.duration.ms": 1000,
    "share.delivery.count.limit": 2,
    "streams.num.standby.replicas": 0,
    "streams.initial.rebalance.delay.ms": 0,
}
_AT_LEAST_DEFAULT = 1
_AT_LEAST_LOCKS = 100


def _setting(config: BrokerConfig, name: str) -> int:
    return int(getattr(config, name.replace(".", "_")))


def group_bounds(config: BrokerConfig, name: str) -> tuple[int, int]:
    """The broker's (min, max) for an integer group config (without a broker setting: the
    config's own lower bound, and no upper one)."""
    _, low, high = _GROUP_BOUNDS[name]
    return (
        _setting(config, low) if low else _AT_LEAST.get(name, _AT_LEAST_DEFAULT),
        _setting(config, high) if high else 2**31 - 1,
    )


def group_defaults(config: BrokerConfig) -> dict[str, str]:
    """Each group config's value when the group does not set it: the broker's setting."""
    out = {name: str(_setting(config, default)) for name, (default, _, _) in _GROUP_BOUNDS.items()}
    out["share.auto.offset.reset"] = "latest"
    out["share.isolation.level"] = "read_uncommitted"
    return out


def group_configs_problem(configs: Mapping[str, str], config: BrokerConfig) -> str | None:
    """Kafka's GroupConfig.validate: names, types and ranges, the broker's bounds, and a
    session timeout above the heartbeat interval, over the broker's defaults."""
    for name in configs:
        if name not in _GROUP_KEYS:
            return f"Unknown group config name: {name}"
    merged = {**group_defaults(config), **configs}
    numbers: dict[str, int] = {}
    for name, key in _GROUP_KEYS.items():
        value = merged[name]
        if key.type is ConfigType.INT:
            if problem := type_problem(key.type, value):
                return f"Invalid value {value} for configuration {name}: {problem}"
            number = int(value.strip())
            floor = _AT_LEAST.get(name, _AT_LEAST_DEFAULT)
            if name == "share.partition.max.record.locks":
                floor = _AT_LEAST_LOCKS
            if number < floor:
                return (
                    f"Invalid value {value} for configuration {name}: Value must be at least "
                    f"{floor}"
                )
            numbers[name] = number
    if problem := auto_offset_reset_problem(merged["share.auto.offset.reset"]):
        value = merged["share.auto.offset.reset"]
        return f"Invalid value {value} for configuration share.auto.offset.reset: {problem}"
    if merged["share.isolation.level"].strip() not in ISOLATION_LEVELS:
        value = merged["share.isolation.level"]
        return (
            f"Invalid value {value} for configuration share.isolation.level: String must be "
            "one of: read_committed, read_uncommitted"
        )
    for name in _GROUP_BOUNDS:
        if name not in configs:
            continue  # the broker's own value (Kafka checks it against the bounds at start-up)
        low, high = group_bounds(config, name)
        if not low <= numbers[name] <= high:  # the bounds: group.share.min/max.* and the like
            return f"{name} must be in the range {low} to {high} inclusive."
    for kind in ("consumer", "share", "streams"):
        if numbers[f"{kind}.session.timeout.ms"] <= numbers[f"{kind}.heartbeat.interval.ms"]:
            return f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
    return None


GROUP_CATALOG = ResourceCatalog(
    GROUP,
    "group",
    _GROUP_KEYS,
    group_defaults,
    group_configs_problem,
    ResourceType.GROUP,
    None,
    ErrorCode.group_authorization_failed,
    {name: setting for name, (setting, _, _) in _GROUP_BOUNDS.items()},
)

# -- CLIENT_METRICS (KIP-714 subscriptions; keys and validation in dataplane/telemetry) ---------

CLIENT_METRICS_CATALOG = ResourceCatalog(
    client_metrics.CLIENT_METRICS,
    "client metrics",
    client_metrics.KEYS,
    client_metrics.defaults,
    client_metrics.problem,
    ResourceType.CLUSTER,  # Kafka checks DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster
    CLUSTER_NAME,
    ErrorCode.cluster_authorization_failed,
)

CATALOGS: dict[int, ResourceCatalog] = {
    GROUP: GROUP_CATALOG,
    client_metrics.CLIENT_METRICS: CLIENT_METRICS_CATALOG,
}
"""The config resource types stored by the meta service's resource configs, by Kafka's
ConfigResource type (CLIENT_METRICS registers its catalog here too)."""
